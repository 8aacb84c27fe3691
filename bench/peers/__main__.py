import sys

from bench.peers import main

sys.exit(main())
