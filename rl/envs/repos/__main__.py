"""`python -m rl.envs.repos add PATH_OR_SDIST`: see rl/envs/repos/add.py."""

import sys

from rl.envs.repos.add import main

sys.exit(main())
