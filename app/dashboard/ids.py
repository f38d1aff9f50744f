"""Component ids shared by layouts, callbacks and browser tests."""

OVERVIEW_KPIS = "overview-kpis"
OVERVIEW_TABLE = "overview-models"
OVERVIEW_EMPTY = "overview-empty"
ATTRIBUTION = "data-attribution"
