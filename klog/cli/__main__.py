import sys

from klog.cli import main

sys.exit(main())
