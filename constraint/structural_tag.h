// Structural tags: free text in which trigger strings open tagged segments
// whose content is constrained (a JSON Schema or a regex), the shape of tool
// calls in chat formats (Qwen's `<tool_call>{...}</tool_call>`, Llama's
// `<function=name>{...}</function>`, ...); XGrammar's "structural tags".
//
// A structural tag is a JSON document:
//   {"tags": [{"begin": "<tool_call>",
//              "schema": {...} | "regex": "..." | "grammar": {"format": F, "text": T},
//              "end": "</tool_call>"}, ...],
//    "triggers": ["<tool_call>"],     (optional; default: every tag's begin)
//    "at_least_one": false,            (optional: a tag must appear)
//    "stop_after_first": false}        (optional: nothing after the first tag)
// Every tag's begin starts with a trigger; a schema may be an object or its
// text; a grammar's format is lark, gbnf or ebnf (grammar/grammar_text.h) and
// it may not %ignore (its rules and terminals join the tag's grammar). Language: FREE (TAG FREE)*, where FREE is any UTF-8 text containing
// no trigger (grammar/avoid_strings.h) and TAG is begin, content, end, for
// any tag whose begin comes next; with at_least_one, FREE TAG (FREE TAG)*
// FREE; with stop_after_first, FREE or FREE TAG (FREE TAG with both). A
// trigger in the text therefore always opens a tag, and a tag's content is
// exactly its schema's (regex's, grammar's) language. In the grammar a tag's
// begin is its longest trigger's terminal, then the rest one character
// each, terminals shared by the tags: the masks' work past free text and a
// trigger does not grow with the number of tags. Schemas take the grammar
// route (constraint/schema_grammar.h): a recursive $ref is exact at any
// depth and no schema needs to fit one regex.
#ifndef MASKD_CONSTRAINT_STRUCTURAL_TAG_H_
#define MASKD_CONSTRAINT_STRUCTURAL_TAG_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "constraint/schema_grammars.h"
#include "grammar/avoid_strings.h"
#include "grammar/grammar.h"
#include "grammar/grammar_text.h"
#include "schema/json_schema.h"

namespace maskd {

struct StructuralTagOptions {
  // The document's bytes (--max-structural-tag-bytes). There is no count
  // of tags: a tool list of any length within these bounds compiles.
  size_t max_bytes = size_t{16} << 20;
  // The size of all tags' grammars together: their rules, terminals and the
  // symbols of every alternative (--max-structural-tag-symbols). Each tag's
  // own grammar is bounded by `grammar` (GrammarLimits), as any grammar.
  size_t max_symbols = size_t{4} << 20;
  JsonSchemaOptions json_schema;  // for each tag's schema
  grammar::AvoidLimits triggers;  // the triggers' size and free text's regex
  grammar::GrammarLimits grammar;  // for each tag's grammar
  // Where each tag's schema's lowering is looked up and kept (null: lowered
  // each time); ConstraintCompiler passes its own.
  SchemaGrammars* schema_grammars = nullptr;
};

// The grammar of a structural tag. InvalidArgument naming the problem and
// its place ("tags[2].begin: ..."), ResourceExhausted past a limit; a
// schema's conversion errors are prefixed with its tag.
absl::StatusOr<grammar::Grammar> StructuralTagGrammar(std::string_view json,
                                                      const StructuralTagOptions& options = {});

}  // namespace maskd

#endif  // MASKD_CONSTRAINT_STRUCTURAL_TAG_H_
