"""``python -m kafkapy CONFIG [--override key=value ...]``: same as kafkapy-server-start."""

from kafkapy.server.main import main

raise SystemExit(main())
