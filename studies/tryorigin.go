package studies

// TryOrigin is, in a registration made from a try (rig study register
// --from-try), which try it was and what the registration took from it: its
// digests were the expected ones, and when PilotFromTry, the design's
// power.pilot_discordance is the try's, not a guess.
type TryOrigin struct {
	ID string `json:"id"`
	// DesignHash is the hash of the design as tried, before a pilot
	// discordance or a new name was put in it.
	DesignHash string `json:"design_hash"`
	// PilotDiscordance is the discordance the registration took from the
	// try (the largest of its pairs'), 0 when it took none; PilotPair names
	// the pair it came from.
	PilotDiscordance float64 `json:"pilot_discordance,omitempty"`
	PilotPair        string  `json:"pilot_pair,omitempty"`
}
