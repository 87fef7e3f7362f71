module github.com/stockflow/stockflow/services/stock

go 1.26.8

require github.com/stockflow/stockflow/pkg v0.0.0

// In the monorepo every service builds against the pkg beside it; a release pins a tagged pkg.
replace github.com/stockflow/stockflow/pkg => ../../pkg
