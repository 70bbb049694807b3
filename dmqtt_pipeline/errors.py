"""The pipeline's one exception type, apart from Spark so that the CLI can say it (and show --help) without
pyspark installed."""


class PipelineError(Exception):
    """A job cannot run (no Spark, no input, unreadable data); the CLI prints it and exits 2."""
