from litebert.cli import main

raise SystemExit(main())
