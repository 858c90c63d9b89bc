"""The adaptive sweep: rounds of `chinchax next` over a study's pool, each trained and fitted."""
