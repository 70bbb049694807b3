import sys

from host_bridge.cli import main

sys.exit(main())
