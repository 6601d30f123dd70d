"""OGBench reproduction (`mqe-ogbench`): dataset generation, training runs, evaluation and the table."""
