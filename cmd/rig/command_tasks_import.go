package main

import (
	"github.com/spf13/cobra"

	"rig/tasks"
	"rig/tasks/sandboxed"
)

func newTasksImportCommand() *cobra.Command {
	var o tasks.ImportOptions
	var out string
	cmd := &cobra.Command{
		Use:   "import FILE --from inspect|promptfoo|lm-eval|csv --job-kind NAME --out BANK",
		Short: "Convert an Inspect, promptfoo, lm-eval or CSV dataset into a task bank",
		Long: `import converts another tool's dataset into a rig task bank (a header line,
then one task a line) that rig tasks lint and rig tasks audit take, or refuses
the whole file naming each bad row's line and field. Nothing is written then.

Formats (--from):
  inspect    Inspect AI samples, JSONL or a JSON array: input (a string, or chat
             messages: system ones, then one user message), target (a string or
             a list of accepted answers), choices (multiple choice: lettered
             under the question, the target is the letter), id, metadata.
  promptfoo  a promptfoo config (prompts, tests, defaultTest) or a list of tests:
             each test's vars fill the prompt ({{ var }} only; --prompt or the
             config's one inline prompt), and its one assertion becomes the key:
             equals -> exact@v1, contains/icontains -> regex@v1, regex -> regex@v1
             (metadata.example gives an output it accepts), is-json -> jsonvalid@v1.
             javascript and python assertions are refused: rig does not run them.
  lm-eval    an lm-evaluation-harness --log_samples file: doc_id, doc, target and
             the prompt lm-eval rendered (or --prompt-field naming a doc field).
  csv        a CSV file whose first row names the columns: --prompt-field and
             --target-field name the prompt and answer columns.

template_id and difficulty are never guessed: name the field (CSV column,
Inspect metadata key, promptfoo metadata key or var, lm-eval doc field) that
holds them, or give one value for every row. Ids are kept (Inspect id, lm-eval
doc_id, --id-field) or derived from the prompt and key, the same on every
import. --source says whether the rows are yours or a public benchmark's. The
header records the origin file and its sha256.

Examples:
  rig tasks import samples.jsonl --from inspect --job-kind capitals \
      --template-field category --difficulty easy --source public-benchmark:geo \
      --out banks/capitals.jsonl
  rig tasks import promptfooconfig.yaml --from promptfoo --job-kind support \
      --template-field topic --difficulty-field level --source private --out banks/support.jsonl
  rig tasks import samples_arith.jsonl --from lm-eval --job-kind arith \
      --template arith --difficulty easy --source private --out banks/arith.jsonl
  rig tasks import cases.csv --from csv --prompt-field question --target-field answer \
      --id-field id --template-field template --difficulty-field difficulty \
      --job-kind qa --source private --grader normalized --out banks/qa.jsonl

Then, as for any bank: rig tasks lint BANK, rig tasks audit BANK, and an entry
for the dataset in the study's licence registry (docs/licences.md).

Exit status 0 when the bank was written; 1 when a row or an option is refused,
--out exists, or the file cannot be read or written.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := tasks.RunImport(cmd.Context(), cmd.OutOrStdout(), args[0], out, o, sandboxed.Graders(false))
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.From, "from", "", "the file's format: inspect, promptfoo, lm-eval or csv")
	f.StringVar(&o.JobKind, "job-kind", "", "the job kind the bank is for (the design's job_kinds[].name)")
	f.StringVar(&out, "out", "", "the bank file to write (never overwritten)")
	f.StringVar(&o.BankVersion, "bank-version", "1", "the bank's version; bump it on every re-import")
	f.StringVar(&o.Description, "description", "", `the header's description (default "imported from FILE (FORMAT)")`)
	f.StringVar(&o.Source, "source", "", `where the rows come from: "private" or "public-benchmark:NAME"`)
	f.StringVar(&o.Template, "template", "", "one template_id for every row")
	f.StringVar(&o.TemplateField, "template-field", "", "the field holding each row's template_id")
	f.StringVar(&o.Difficulty, "difficulty", "", "one difficulty (easy, medium, hard) for every row")
	f.StringVar(&o.DifficultyField, "difficulty-field", "", "the field holding each row's difficulty")
	f.StringVar(&o.HoldoutField, "holdout-field", "", "the field marking a row hold-out (true/false); default: none hold-out")
	f.StringVar(&o.IDField, "id-field", "", "the field holding each row's id (CSV, promptfoo); default: derived from prompt and key")
	f.StringVar(&o.PromptField, "prompt-field", "", "the prompt's CSV column, or an lm-eval doc field to use instead of the rendered prompt")
	f.StringVar(&o.TargetField, "target-field", "", "the answer's CSV column")
	f.StringVar(&o.Grader, "grader", "", "how a target is graded (inspect, lm-eval, csv): exact (default), normalized or contains")
	f.StringVar(&o.PromptTemplate, "prompt", "", "the promptfoo prompt template its vars fill (default: the config's one prompt)")
	return cmd
}
