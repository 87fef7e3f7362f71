// Package reconcile holds the stock service's reconciliation jobs (DESIGN §6, run by
// pkg/reconcile): overdue locks, orphan locks and ledger vs summary. Every repair goes
// through the use cases — a release is a ledger row and a stock.released event — except the
// summary rebuild, where the ledger wins by definition.
package reconcile

import (
	"net/http"

	"github.com/stockflow/stockflow/pkg/reconcile"
	"github.com/stockflow/stockflow/services/stock/internal/app"
	"github.com/stockflow/stockflow/services/stock/internal/config"
)

// Operator is the ledger's operator for the movements these jobs make.
const Operator = "stock-reconcile"

// Jobs returns the stock service's jobs, configured by cfg; orderClient calls the order
// service at cfg.OrderURL.
func Jobs(svc *app.Service, cfg config.Config, orderClient *http.Client) []reconcile.Job {
	return []reconcile.Job{
		OverdueLocks(svc, cfg.OverdueLocksInterval, cfg.OverdueLocksGrace, cfg.ReconcileBatch),
		OrphanLocks(svc, orderClient, cfg.OrderURL, cfg.OrphanLocksInterval, cfg.OrphanLocksAge, cfg.ReconcileBatch),
		LedgerSummary(svc, cfg.LedgerInterval),
	}
}
