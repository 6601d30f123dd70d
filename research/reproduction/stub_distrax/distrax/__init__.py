"""Fallback stand-in for the few distrax names OGBench's utils/networks.py uses, for a machine where the
real distrax (through tensorflow-probability) does not import: a diagonal Gaussian (log_prob, sample, mode,
scale_diag) and a categorical; Transformed/Block/Tanh exist only so that the module imports (the MQE
actor uses no tanh squashing). pipeline.sh puts it on PYTHONPATH only if `import distrax` fails."""
import math

import jax
import jax.numpy as jnp


class MultivariateNormalDiag:
    def __init__(self, loc, scale_diag):
        self.loc = loc
        self.scale_diag = scale_diag

    def log_prob(self, x):
        z = (x - self.loc) / self.scale_diag
        return jnp.sum(-0.5 * z ** 2 - jnp.log(self.scale_diag) - 0.5 * math.log(2 * math.pi), axis=-1)

    def sample(self, seed, sample_shape=()):
        eps = jax.random.normal(seed, tuple(sample_shape) + jnp.shape(self.loc), dtype=jnp.result_type(self.loc))
        return self.loc + self.scale_diag * eps

    def mode(self):
        return self.loc


class Categorical:
    def __init__(self, logits):
        self.logits = logits

    def log_prob(self, x):
        return jnp.take_along_axis(jax.nn.log_softmax(self.logits), x[..., None], axis=-1)[..., 0]

    def sample(self, seed, sample_shape=()):
        return jax.random.categorical(seed, self.logits, shape=tuple(sample_shape) + self.logits.shape[:-1])

    def mode(self):
        return jnp.argmax(self.logits, axis=-1)


class Transformed:
    def __init__(self, distribution, bijector):
        raise NotImplementedError("stand-in distrax: no transformed distributions")


class Block:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("stand-in distrax: no bijectors")


class Tanh(Block):
    pass
