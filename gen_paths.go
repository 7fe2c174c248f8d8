package main

import "strings"

// checkPromptPaths checks gen's --id and --prompt flags: --id is a dotted
// path (not --map's FIELD=PATH pairs), and --prompt does not go with
// --export, whose records are made from the prompt under gen's keys.
func checkPromptPaths(idPath, promptPath, exportFormat string) error {
	if strings.ContainsAny(idPath, "=,") {
		return usagef("gen: --id %q: a dotted path, such as meta.uid", idPath)
	}
	if promptPath != "" && exportFormat != "" {
		id := idPath
		if id == "" {
			id = "id"
		}
		return usagef("gen: --export reads each prompt where gen's keys keep it (input_ids, text, messages, conversations), not at --prompt %s: run gen without --export, or write the set with those keys first (e.g. jq -c '{id: .%s, text: .%s}')", promptPath, id, promptPath)
	}
	return nil
}
