import sys

from tvmc.cli.completion import main

sys.exit(main())
