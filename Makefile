# The few targets a newcomer needs. Everything else is a Go command.
.PHONY: demo up down status test bench build

demo: up ## bring everything up (fresh machine included)
	@echo "the flash-sale demo lands with the simulator; the system is up — see README for curl lines"

up:
	@scripts/dev.sh up

down:
	@scripts/dev.sh down

status:
	@scripts/dev.sh status

test: ## the whole suite, against real PostgreSQL and NATS
	@scripts/test.sh

build:
	go build ./pkg/... ./services/...
