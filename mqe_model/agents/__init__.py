"""Agents (one file each: MQE, GCBC, GCIQL) and what every agent shares."""

import jax

# REMOVED_FIELDS: a removed field that had no effect on what remains, whatever its value
ANY_VALUE = object()


def scan_updates(agent, batches):
    """Run `agent._update` over the leading axis of `batches` in one lax.scan; info of the last step."""
    agent, infos = jax.lax.scan(lambda a, b: a._update(b), agent, batches)
    return agent, jax.tree_util.tree_map(lambda x: x[-1], infos)
