package store

// Key is the flavor's name in its servers' own words: the "owned_by" of
// their /v1/models and the prefix of their /metrics names ("sglang",
// "vllm", "llamacpp"); "" for FlavorUnknown and FlavorOther. The client
// (ingest/gen/client.Flavor) and the samples share this one enum.
func (f Flavor) Key() string {
	switch f {
	case FlavorSGLang:
		return "sglang"
	case FlavorVLLM:
		return "vllm"
	case FlavorLlamaCpp:
		return "llamacpp"
	}
	return ""
}

// FlavorNamed is the flavor whose Key is key; FlavorOther for any other
// name (a server gendex does not know).
func FlavorNamed(key string) Flavor {
	for f := FlavorSGLang; f < FlavorOther; f++ {
		if f.Key() == key {
			return f
		}
	}
	return FlavorOther
}
