package orders

import (
	"encoding/json"
	"net/http"

	"example.com/coordvete2e/corpus/store"
)

// Routes registers two unrelated handlers: one commits, one publishes. Each
// closure is its own unit.
//
//corpus:negative
func (s *Service) Routes(mux *http.ServeMux) {
	mux.HandleFunc("POST /orders", func(w http.ResponseWriter, r *http.Request) {
		var o store.Order
		if err := json.NewDecoder(r.Body).Decode(&o); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := s.PlaceThroughOutbox(r.Context(), o); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	mux.HandleFunc("POST /ping", func(w http.ResponseWriter, r *http.Request) {
		_ = s.NC.Publish("ping", nil)
	})
	mux.HandleFunc("GET /orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		o, err := s.Repo.Get(r.Context(), r.PathValue("id"))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(o)
	})
}

// LegacyRoutes has one handler that does both.
func (s *Service) LegacyRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /legacy/orders", func(w http.ResponseWriter, r *http.Request) {
		var o store.Order
		_ = json.NewDecoder(r.Body).Decode(&o)
		if err := s.Repo.Insert(r.Context(), o); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_ = s.placed(r.Context(), o) // corpus: dualwrite
	})
}
