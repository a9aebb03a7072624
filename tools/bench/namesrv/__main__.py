from tools.bench.namesrv.bench import main

raise SystemExit(main())
