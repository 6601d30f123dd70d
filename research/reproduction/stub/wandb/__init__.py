"""A no-op stand-in for the wandb API that OGBench's impls/main.py calls (init, log, run.project,
Image/Video/Histogram, Settings): its CSV loggers keep every metric. Put this folder on PYTHONPATH."""
import types


class Image:
    def __init__(self, *args, **kwargs):
        pass


class Video(Image):
    pass


class Histogram(Image):
    pass


class Settings:
    def __init__(self, *args, **kwargs):
        pass


run = None


def init(project='project', **kwargs):
    global run
    run = types.SimpleNamespace(project=project, name=kwargs.get('name'), config=kwargs.get('config'))
    return run


def log(*args, **kwargs):
    pass
