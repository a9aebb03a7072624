from tools.bench.broker.bench import main

raise SystemExit(main())
