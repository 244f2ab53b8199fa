// The pod sandbox ("pause") process: a tiny static program, no dependencies.
module gauntlet.dev/nodeimage/pause

go 1.25.0
