"""Neural network building blocks: MLPs, ensembles, the Gaussian actor and image encoders."""
