module github.com/stockflow/stockflow/services/console

go 1.26.8

require github.com/caarlos0/env/v11 v11.4.2
