from tools.bench.producer.bench import main

raise SystemExit(main())
