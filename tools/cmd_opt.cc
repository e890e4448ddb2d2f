// `pipeweave opt`: runs a pass pipeline over a module file.

#include <iostream>
#include <set>
#include <sstream>

#include "ir/proto_io.h"
#include "ops/registry.h"
#include "passes/cost_inputs.h"
#include "passes/pass_manager.h"
#include "passes/pass_registry.h"
#include "passes/pipeline_parser.h"
#include "tools/command.h"
#include "tools/flags.h"
#include "tools/module_validation.h"
#include "tools/output_files.h"

namespace pw::tools {
namespace {

void ListPasses(std::ostream& out) {
  out << "passes (use as -p 'name{option=value,...},name,...'):\n";
  for (const PassInfo* info : PassRegistry::Global().passes()) {
    out << "\n  " << info->name << "\n";
    // Wrap the description at 88 columns, indented under the name.
    std::istringstream words(info->description);
    std::string word, line;
    while (words >> word) {
      if (!line.empty() && line.size() + 1 + word.size() > 84) {
        out << "    " << line << "\n";
        line.clear();
      }
      line += (line.empty() ? "" : " ") + word;
    }
    if (!line.empty()) out << "    " << line << "\n";
    std::unique_ptr<Pass> pass = info->create();
    for (const PassOptionBase* option : pass->options()) {
      std::string syntax = option->name() + "=<" + option->type_name() + ">";
      out << "    " << syntax << std::string(syntax.size() < 20 ? 20 - syntax.size() : 1, ' ')
          << option->description();
      std::vector<std::string> allowed = option->AllowedTexts();
      if (!allowed.empty()) {
        out << "; one of";
        for (size_t i = 0; i < allowed.size(); ++i) out << (i ? ", " : " ") << allowed[i];
      }
      if (!option->DefaultText().empty()) out << " (default: " << option->DefaultText() << ")";
      out << "\n";
    }
  }
}

// "--print-after=a,b" or "all": every name must be a registered pass.
StatusOr<std::set<std::string>> ParsePrintAfter(const std::string& text) {
  std::set<std::string> names;
  std::istringstream items(text);
  std::string name;
  while (std::getline(items, name, ',')) {
    if (name == "all" || PassRegistry::Global().Find(name)) {
      names.insert(name);
      continue;
    }
    std::string hint;
    for (const std::string& similar : PassRegistry::Global().SimilarNames(name))
      hint += (hint.empty() ? " (did you mean '" : "', '") + similar;
    return InvalidArgument("--print-after: unknown pass '", name, "'",
                           hint.empty() ? "" : hint + "'?)");
  }
  if (names.empty()) return InvalidArgument("--print-after needs a pass name or 'all'");
  return names;
}

StatusOr<int> RunOpt(const std::vector<std::string>& args) {
  Flags flags;
  flags.Value("pipeline").Alias("p", "pipeline").Value("output").Alias("o", "output");
  flags.Value("print-after").Switch("time-passes").Switch("stats").Switch("no-verify");
  flags.Value("device").Value("costs");
  flags.Switch("list-passes");
  PW_RETURN_IF_ERROR(flags.Parse(args));
  if (flags.Has("list-passes")) {
    ListPasses(std::cout);
    return 0;
  }
  if (flags.positional().size() != 1)
    return InvalidArgument("expected exactly one input module file, got ",
                           flags.positional().size());
  const std::string& input = flags.positional()[0];

  // Everything that can be checked before loading is checked first.
  PassManager manager(ops::Registry());
  if (flags.Has("pipeline")) PW_RETURN_IF_ERROR(manager.AddPipeline(flags.Get("pipeline")));
  std::string output = flags.Get("output");
  OutputFiles outputs({input});
  if (!output.empty()) {
    PW_RETURN_IF_ERROR(FormatFromPath(output).status());
    PW_RETURN_IF_ERROR(outputs.Declare("-o", output));
  }
  manager.EnableVerifier(!flags.Has("no-verify"));
  if (flags.Has("print-after")) {
    PW_ASSIGN_OR_RETURN(std::set<std::string> names, ParsePrintAfter(flags.Get("print-after")));
    manager.EnablePrintAfter(std::move(names), std::cerr);
  }
  if (flags.Has("time-passes")) manager.EnableTiming(std::cerr);
  if (flags.Has("stats")) manager.EnableStatistics(std::cerr);
  // The cost model, for passes that price their rewrites (they work without it too).
  PassContext context(ops::Registry());
  if (flags.Has("device") || flags.Has("costs")) {
    PW_ASSIGN_OR_RETURN(std::shared_ptr<cost::Estimator> estimator,
                        MakeEstimator(flags.Get("device", "cpu"), flags.Get("costs")));
    AttachCostModel(std::move(estimator), context);
  }

  PW_ASSIGN_OR_RETURN(Module module, LoadValidModule(input));
  PW_RETURN_IF_ERROR(manager.Run(module, context).status());
  // Never write a module that the commands reading it would refuse.
  PW_RETURN_IF_ERROR(ValidateModule(module).WithContext("the optimized module"));

  if (output.empty()) {
    PW_ASSIGN_OR_RETURN(std::string text, SerializeModule(module, ModuleFormat::kText));
    std::cout << text;
  } else {
    PW_RETURN_IF_ERROR(
        outputs.Write(output, [&](const std::string& temp) { return SaveModule(module, temp); }));
    PW_RETURN_IF_ERROR(outputs.Commit());
  }
  return 0;
}

}  // namespace

PW_REGISTER_COMMAND(opt, "opt", "run a pass pipeline over a module",
                    "pipeweave opt IN -p PIPELINE [-o OUT] [--print-after=PASS[,PASS...]|all] "
                    "[--time-passes] [--stats] [--no-verify]\n"
                    "                 [--device cpu|h100|a100|SPEC_FILE] [--costs COSTS]\n"
                    "       pipeweave opt --list-passes\n"
                    "  IN and OUT are .pbtxt (text) or .pb (binary). Without -o the result is "
                    "printed as text.\n"
                    "  Instrumentation (--print-after, --time-passes, --stats) goes to stderr.\n"
                    "  --device and --costs (a table from 'pipeweave profile') give the passes "
                    "the cost model\n"
                    "  and the simulator, to price candidate rewrites (as 'pipeweave sim' "
                    "does).",
                    RunOpt);

}  // namespace pw::tools
