# Virtual-board test app: a life of boots for tests/integration/test_app_board.py. The first boot sleeps, the wake
# resets the board, the boot after that ends main.py; any later boot (a power-on) says so and ends too.
import machine

try:
    with open("boots") as f:
        boots = int(f.read()) + 1
except OSError:
    boots = 1
with open("boots", "w") as f:
    f.write(str(boots))
print("boot", boots)
if boots == 1:
    machine.deepsleep(10)
elif boots == 2:
    print("woke", machine.reset_cause() == machine.DEEPSLEEP_RESET)
    machine.reset()
print("done")
