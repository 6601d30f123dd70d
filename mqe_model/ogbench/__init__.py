"""OGBench reproduction: offline dataset generation (`mqe-ogbench-data`) and runs (`mqe-ogbench-repro`)."""
