"""The options the pipeline's JVMs start with (dmqtt_pipeline.spark's session, dmqtt_pipeline.cluster's daemons),
apart from Spark so that the cluster's command line can be read without pyspark installed."""

# JVM options for a run of seconds on a small store (a campaign's audit, the demo, the tests): the client compiler
# only and the serial collector. A JVM that lives for seconds spends much of its CPU compiling with the server
# compiler and running parallel collector threads it never profits from, which these options spare
# (docs/pipeline.md). On a month of telemetry the server compiler pays for itself, so the default keeps it.
QUICK_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
