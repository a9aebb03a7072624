from tools.bench.store.bench import main

raise SystemExit(main())
