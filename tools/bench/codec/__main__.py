from tools.bench.codec.bench import main

raise SystemExit(main())
