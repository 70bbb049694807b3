"""Host side of durable MQTT for sensor boards: virtual board, serial bridge, HIL bench, recorder."""
