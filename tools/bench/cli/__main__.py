from tools.bench.cli.bench import main

raise SystemExit(main())
