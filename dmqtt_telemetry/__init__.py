"""The telemetry contract between the boards, the recorder, the bench and the pipeline: `format` (what a board's
payload holds, how it is parsed, the recorder's Parquet schema and folder layout) and `promises` (what each QoS
promises about the stream and how a run is judged against it). The pipeline imports this package and nothing
else of host_bridge."""
