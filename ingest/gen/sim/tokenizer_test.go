package sim

import (
	"reflect"
	"strings"
	"testing"
)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	for _, s := range []string{"", "hello", "héllo wörld ✓", "a<b", "<|im_start|>user<think>x</think>", "<|nope|>"} {
		if got := Decode(Encode(s, false), false); got != s {
			t.Errorf("Decode(Encode(%q)) = %q", s, got)
		}
	}
}

func TestEncode(t *testing.T) {
	if got, want := Encode("Hi", true), []int{BOSID, ByteBase + 'H', ByteBase + 'i'}; !reflect.DeepEqual(got, want) {
		t.Errorf("Encode with BOS = %v, want %v", got, want)
	}
	if got, want := Encode("<|im_end|>x", false), []int{IMEndID, ByteBase + 'x'}; !reflect.DeepEqual(got, want) {
		t.Errorf("Encode named token = %v, want %v", got, want)
	}
}

func TestDecodeSkipSpecial(t *testing.T) {
	ids := []int{BOSID, ByteBase + 'a', ThinkStartID, EOSID, 9999}
	if got, want := Decode(ids, true), "a<think>"; got != want {
		t.Errorf("Decode skip = %q, want %q", got, want)
	}
	if got, want := Decode(ids, false), "<|bos|>a<think><|eos|>"; got != want {
		t.Errorf("Decode keep = %q, want %q", got, want)
	}
}

func TestApplyChatTemplate(t *testing.T) {
	msgs := []chatMessage{{role: "system", content: "S"}, {role: "user", content: "U"}}
	want := []int{BOSID, IMStartID, SystemID, ByteBase + 'S', IMEndID, IMStartID, UserID, ByteBase + 'U', IMEndID, IMStartID, AssistantID}
	if got := applyChatTemplate(msgs, chatTemplate{addGenerationPrompt: true}); !reflect.DeepEqual(got, want) {
		t.Errorf("template = %v, want %v", got, want)
	}
	if !endsWithGenerationPrompt(want) {
		t.Error("template does not end with the generation prompt")
	}
	noThink := applyChatTemplate(msgs, chatTemplate{addGenerationPrompt: true, reasoningModel: true, disableThinking: true})
	if got := noThink[len(noThink)-2:]; !reflect.DeepEqual(got, []int{ThinkStartID, ThinkEndID}) {
		t.Errorf("thinking disabled ends with %v", got)
	}
	cont := applyChatTemplate(append(msgs, chatMessage{role: "assistant", content: "A"}), chatTemplate{continueFinalMessage: true})
	if got := cont[len(cont)-2:]; !reflect.DeepEqual(got, []int{AssistantID, ByteBase + 'A'}) {
		t.Errorf("continued message ends with %v", got)
	}
	// The rendered template round-trips through text.
	if got := Encode(Decode(want, false), false); !reflect.DeepEqual(got, want) {
		t.Errorf("template text re-encodes to %v", got)
	}
}

func FuzzEncodeDecode(f *testing.F) {
	f.Add("hello <|im_start|> wörld")
	f.Add("<think></think><|eos|>")
	f.Fuzz(func(t *testing.T, s string) {
		if got := Decode(Encode(s, true), false); got != "<|bos|>"+s {
			t.Errorf("round trip of %q gave %q", s, got)
		}
	})
}

// TestApplyChatTemplateMultiTurn: the earlier turns of a conversation are
// rendered in order, each closed; a reasoning model's assistant turn before
// the last user turn loses its <think> section (Qwen3's template), one
// after it keeps it.
func TestApplyChatTemplateMultiTurn(t *testing.T) {
	msgs := []chatMessage{{role: "user", content: "U1"}, {role: "assistant", content: "<think>r</think>\n\nA1"}, {role: "user", content: "U2"}}
	want := Encode("<|bos|><|im_start|><|user|>U1<|im_end|><|im_start|><|assistant|><think>r</think>\n\nA1<|im_end|><|im_start|><|user|>U2<|im_end|><|im_start|><|assistant|>", false)
	if got := applyChatTemplate(msgs, chatTemplate{addGenerationPrompt: true}); !reflect.DeepEqual(got, want) {
		t.Errorf("plain model: %q", Decode(got, false))
	}
	want = Encode("<|bos|><|im_start|><|user|>U1<|im_end|><|im_start|><|assistant|>A1<|im_end|><|im_start|><|user|>U2<|im_end|><|im_start|><|assistant|>", false)
	if got := applyChatTemplate(msgs, chatTemplate{addGenerationPrompt: true, reasoningModel: true}); !reflect.DeepEqual(got, want) {
		t.Errorf("reasoning model: %q", Decode(got, false))
	}
	got := Decode(applyChatTemplate([]chatMessage{{role: "user", content: "U"}, {role: "assistant", content: "<think>s</think>B"}}, chatTemplate{continueFinalMessage: true, reasoningModel: true}), false)
	if !strings.HasSuffix(got, "<think>s</think>B") {
		t.Errorf("an assistant turn after the last user turn lost its thinking: %q", got)
	}
}
