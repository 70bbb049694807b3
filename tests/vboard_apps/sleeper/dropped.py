# Virtual-board test app: a module the sleeper imports and drops from sys.modules before its deep sleep
# (config "drop"), as the board application drops its config checker.
DROPPED = True
