"""The MQE paper's real-robot results (its BridgeData appendix), for reference
rows, the worked example report and the tests that check the statistics against them."""

from __future__ import annotations

# task -> policy -> (task progress mean, successes of 15 trials)
PAPER_RESULTS: dict[str, dict[str, tuple[float, int]]] = {
    "single_pnp": {"mqe": (0.80, 12), "gcbc": (0.33, 5), "gciql": (0.67, 10), "tra": (0.60, 9)},
    "double_pnp": {"mqe": (0.73, 10), "gcbc": (0.17, 1), "gciql": (0.47, 4), "tra": (0.63, 6)},
    "triple_pnp": {"mqe": (0.56, 4), "gcbc": (0.16, 0), "gciql": (0.24, 0), "tra": (0.38, 1)},
    "quadruple_pnp": {"mqe": (0.55, 2), "gcbc": (0.18, 0), "gciql": (0.27, 0), "tra": (0.32, 0)},
    "open_drawer": {"mqe": (0.80, 12), "gcbc": (0.67, 10), "gciql": (0.33, 5), "tra": (0.73, 11)},
    "open_drawer_place": {"mqe": (0.63, 5), "gcbc": (0.30, 0), "gciql": (0.23, 0), "tra": (0.43, 1)},
}
PAPER_TRIALS = 15  # trials per task and policy in the paper


def points_matching(progress: float, successes: int, max_points: int, trials: int = PAPER_TRIALS) -> list[int]:
    """Per-trial points with exactly `successes` full-point trials and a mean progress that rounds
    to `progress` (two decimals, as published): full trials first, partial points spread round robin.

    With 15 trials the total points are whole, so e.g. Triple PnP MQE 0.56 is matched by
    25/45 = 0.5556 (exactly 0.56 is impossible). ValueError when no whole points match.
    """
    total = round(progress * trials * max_points)
    partial_total = total - successes * max_points
    failures = trials - successes
    if not 0 <= partial_total <= failures * (max_points - 1) or round(total / (trials * max_points), 2) != progress:
        raise ValueError(f"progress {progress} with {successes}/{trials} successes of {max_points} points "
                         "cannot be reached with whole points")
    partial = [0] * failures
    for i in range(partial_total):
        partial[i % failures] += 1
    return [max_points] * successes + partial
