package view

import "github.com/coordkit/coordkit/cmd/coordctl/internal/admin"

// ScheduleJobs is `schedule list`: per job its schedule, last and next fire.
func ScheduleJobs(js []admin.ScheduleJob) Doc {
	s := Section{Header: []string{"TENANT", "JOB", "SCHEDULE", "ZONE", "STATE", "LAST FIRE", "OUTCOME", "LAST SUCCESS", "NEXT FIRE", "NEXT AT"},
		Empty: "no scheduled jobs (a job appears once a scheduler that declares it owns its partition)"}
	for _, j := range js {
		s.Rows = append(s.Rows, []string{j.Tenant, j.Job, j.Schedule, j.Zone, state(j), dash(j.LastFire), dash(j.LastOutcome),
			TS(j.LastSuccessAt), dash(j.NextFire), TS(j.NextAt)})
	}
	return Doc{s}
}

// ScheduleJob is `schedule get`.
func ScheduleJob(j admin.ScheduleJob) Doc {
	return Doc{{Fields: [][2]string{{"Job", j.Tenant + "/" + j.Job}, {"Schedule", j.Schedule}, {"Zone", j.Zone}, {"Policies", j.Policies},
		{"State", state(j)}, {"Last fire", dash(j.LastFire)}, {"Last outcome", dash(j.LastOutcome)}, {"Last fire at", TS(j.LastFireAt)},
		{"Last success", TS(j.LastSuccessAt)}, {"Next fire", dash(j.NextFire)}, {"Next at", TS(j.NextAt)},
		{"Unfinished runs", itoa(j.Running)}, {"Version", j.Version}}}}
}

func state(j admin.ScheduleJob) string {
	if j.Paused {
		return "paused"
	}
	return "active"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
