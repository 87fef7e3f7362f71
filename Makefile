# The few targets a newcomer needs. Everything else is a Go command.
.PHONY: demo up down status test lint fuzz bench loadtest chaos compare

demo: ## bring everything up (fresh machine included), then run a flash sale you can watch; ARGS= flash-sale flags
	@go run ./tools/cmd/stockflow demo $(ARGS)

up: ## PostgreSQL, NATS and the four services under a supervisor; REPLICAS=2: two processes of each, behind a round-robin front on its port
	@$(if $(REPLICAS),REPLICAS=$(REPLICAS) )go run ./tools/cmd/stockflow up

down:
	@go run ./tools/cmd/stockflow down

status:
	@go run ./tools/cmd/stockflow status

test: ## the whole suite, against real PostgreSQL and NATS
	@scripts/test.sh

lint: ## go vet, staticcheck and the import direction of the layers, over every module
	@scripts/lint.sh

fuzz: ## every go test -fuzz target, FUZZTIME= each (60s); failing inputs land in testdata/fuzz/
	@FUZZTIME=$(or $(FUZZTIME),60s) scripts/fuzz.sh

bench: ## lock benchmarks, naive vs engine, against real PostgreSQL; raw output in .run/bench.txt
	@scripts/bench.sh

loadtest: ## POST /v1/orders at a fixed rate on the running system (make up first); RATE=, DURATION=; SCENARIO=storm: the sold-out storm, gate off and on
	@go run ./tools/cmd/stockflow loadtest $(if $(filter storm,$(SCENARIO)),storm) $(if $(RATE),-rate $(RATE)) $(if $(DURATION),-duration $(DURATION))

chaos: ## a flash sale while every kind of fault fires, then every invariant checked (about 2 min); LONG=1 the long form, NATS_CLUSTER=3 a 3-node broker
	@go run ./tools/cmd/stockflow chaos $(if $(LONG),-long) $(if $(SEED),-seed $(SEED))

compare: ## one flash sale on a single stock column, a Redis counter and stockflow, side by side (uses make up's system, starts it if down); live JSON in .run/compare.json; ARGS= flags
	@go run ./tools/cmd/stockflow compare $(ARGS)
