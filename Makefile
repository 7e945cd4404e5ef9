# dshq — see README.md. Two commands matter: `make run` and `make test`.
GO ?= go
BIN := bin

.PHONY: run build test vet bench fuzz clean

## run: build everything and serve the all-in-one corpus (data under $DSH_HOME).
run: build
	./$(BIN)/dshq serve

build:
	$(GO) build -o $(BIN)/ ./cmd/...

## test: what CI runs (.ci/run): vet, then every test with the race detector.
test: vet
	$(GO) test -race -count=1 -timeout 30m ./...

vet:
	$(GO) vet ./...

## bench: the benchmarks, on demand (never part of `make test`).
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

clean:
	rm -rf $(BIN)
