# The config checker's refusals in words (errors.explain): one text per _T_TOPIC_INVALID number of config.py, in order.
# Loaded only when config.json is refused, and dropped again on the board (tests/unit/board/test_config_errors.py checks
# every one; tests/unit/dmqtt/test_client_text.py the numbers).

TEXT = (
    "unknown key %s",  # _T_UNKNOWN_KEY
    "no config.json in /flash or /",  # _T_NO_CONFIG
    "no %s",  # _T_NO_FILE
    "%s is not valid JSON",  # _T_IS_NOT_VALID_JSON
    "config.json and secrets.json must each hold a JSON object",  # _T_NOT_OBJECTS
    "%s must be an object",  # _T_MUST_BE_AN_OBJECT
    "tls is for transport tcp (over the serial link the bridge speaks TLS to the broker)",  # _T_TLS_IS_FOR_TRANSPORT
    "tls must be {ca, cert, key, server_hostname, insecure}",  # _T_TLS_MUST_BE_CA
    "tls.%s must be a path on the board or PEM text",  # _T_TLS_MUST_BE_A
    "tls.insecure must be true or false",  # _T_TLS_INSECURE_MUST_BE
    'tls.ca is required to verify the broker (or "insecure": true, for lab use only)',  # _T_TLS_CA_IS_REQUIRED
    "tls.cert and tls.key go together (a client certificate and its key)",  # _T_TLS_CERT_AND_TLS
    "wifi must be {ssid, password, ip, bssid}",  # _T_WIFI_MUST_BE_SSID
    "wifi.ip must be [address, mask, gateway, dns], four dotted addresses",  # _T_WIFI_IP_MUST_BE
    'wifi.bssid must be six hex bytes, "aa:bb:cc:dd:ee:ff"',  # _T_WIFI_BSSID_MUST_BE
    "sleep must be {every_s, awake_s, readings_per_send, queue_limit, max_reading_age_s}",  # _T_SLEEP_MUST_BE
    "%s must be an integer from %d to %d",  # _T_MUST_BE_AN_INTEGER
    "%s %r: not well-formed UTF-8 [MQTT-1.5.3-1]",  # _T_TOPIC_NOT_UTF8
    "%s %r: %s",  # _T_TOPIC_INVALID
    "confirm must be {topic, timeout_s, hold}",  # _T_CONFIRM_MUST_BE_TOPIC
    "confirm is for publish.qos 1 and 2 (QoS 0 messages are not journaled)",  # _T_CONFIRM_IS_FOR_PUBLISH
    "confirm.hold must be true or false",  # _T_CONFIRM_HOLD_MUST_BE
    "config.json must hold a JSON object",  # _T_NOT_AN_OBJECT
    "client_id must be a non-empty string",  # _T_CLIENT_ID_MUST_BE_A
    "mqtt_version must be one of 3.1, 3.1.1, 5",  # _T_MQTT_VERSION_MUST_BE_ONE
    'transport must be "tcp", "serial" or "espnow"',  # _T_TRANSPORT_MUST_BE_TCP
    "broker must be host:port, got %r",  # _T_BROKER_MUST_BE_HOST
    "uart must be {id, baud, tx, rx, pause}",  # _T_UART_MUST_BE_ID
    "uart.pause must be true or false",  # _T_UART_PAUSE_MUST_BE
    "will must be {topic, payload, qos 0..2, retain}",  # _T_WILL_MUST_BE_TOPIC
    "%s must be a string",  # _T_MUST_BE_A_STRING
    "publish must be an object",  # _T_PUBLISH_MUST_BE_AN
    "publish.qos must be 0, 1 or 2",  # _T_PUBLISH_QOS_MUST_BE
    "subscribe entries must be {topic, qos 0..2}",  # _T_SUBSCRIBE_ENTRIES_MUST_BE
    "sleep.readings_per_send above 1 needs publish.qos 1 or 2: a QoS 0 reading is not journaled",  # _T_BATCH_NEEDS_QOS
    'publish.sensor must be "module.function" (the function returns the reading), got %r',  # _T_SENSOR_MUST_BE
    'espnow must be {gateway: "aa:bb:cc:dd:ee:ff", channel 1..14, lmk: 16 characters}',  # _T_ESPNOW_MUST_BE
    "a node (transport espnow) sleeps (sleep, with readings_per_send 1), publishes at QoS 1 or 2 only (no"
    " subscribe, no confirm) and has no wifi or tls: its gateway holds its session",  # _T_NODE_MUST
)
