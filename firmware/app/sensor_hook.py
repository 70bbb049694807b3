# The sensor hook (config.json's publish.sensor, "module.function"; docs/low-power.md, "A sensor of your own"),
# loaded only by a board that names one, at each wake that takes a reading: the function, in a module of the user's
# on the board's filesystem, is called with no argument and returns the reading, an int or a float. Whatever it
# raises or returns instead is said on the console, in a note (not a line of the console protocol: a format in
# dboard/console.py is heap on every board), and that wake takes no reading: the board goes on with its schedule,
# as it would with a sensor that answers again later.


def read(name):
    """The reading of the hook `name`, or False when it failed (said)."""
    module, _, function = name.rpartition(".")
    try:
        value = getattr(__import__(module, None, None, (function,)), function)()
    except Exception as exc:  # noqa: BLE001 (the sensor's code is the user's: whatever it raises, the board goes on)
        value = exc
    if type(value) is int or type(value) is float:
        return value
    print("sensor: %s() failed: %r" % (name, value))
    return False
