from openmsprof.cli.main import main

raise SystemExit(main())
