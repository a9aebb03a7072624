from tools.bench.consumer.bench import main

raise SystemExit(main())
