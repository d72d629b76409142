import sys

from bench.commands.cli import main

sys.exit(main())
