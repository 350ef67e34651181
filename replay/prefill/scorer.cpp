// rig-prefill-score: scores kept tokens in one batched forward pass through
// libllama, the library the pinned llama-server is built on (the same source
// tree and flags; scripts/setup.sh builds it beside the server). rig's
// prefill replay drives it; it is not a general tool.
//
// Usage: rig-prefill-score MODEL CTX THREADS KV_TYPE REPACK IN_FIFO OUT_FIFO [OUTPUT_BATCH]
//
// REPACK is "on" or "off", as the server that made the record ran: the CPU
// backend can repack weights (Q4_K, Q4_0, IQ4_NL, ...) into an interleaved
// layout, and then multiplies a batch by one kernel (GEMM) and a single row
// by another (GEMV), whose sums differ far beyond rounding along a row.
// With repacking off both go through the same dot product per row.
//
// A row is scored in the physical batches the kept steps were computed in,
// as far as kernels tell them apart. The prompt goes in as llama-server ran
// it: one call, physical batches of 512, so a prompt of 64 tokens or more
// takes the CPU flash-attention kernel's tiled path there as it did in the
// server. The output tokens, which the server decoded one at a time, go in
// calls of OUTPUT_BATCH, by default one below that kernel's query tile
// (GGML_FA_TILE_Q in the pinned ggml, passed in by setup as RIG_FA_TILE_Q):
// a batch of that many queries or more takes the tiled kernel, which
// accumulates in F32, while a decode step takes the one-query kernel, which
// accumulates V in F16. Measured on SmolLM2 Q4_1: below the tile a row
// scores within about 3e-4 nats of its decode steps; at the tile and above,
// 0.2 nats and more.
//
// Protocol, one request per line on IN_FIFO:
//   score ROW_ID K N_PROMPT N_OUTPUT id id ... (prompt ids, then output ids)
//   quit
// Answer on OUT_FIFO, for each request:
//   row ROW_ID N_OUTPUT
//   then per output step: STEP LOGPROB_OF_KEPT TOKEN:LOGPROB ... (K pairs,
//   highest first), the log-softmax of the raw logits over the whole
//   vocabulary, as llama-server's n_probs reports them;
//   or: error ROW_ID MESSAGE
// A first line "ready N_CTX N_VOCAB PROMPT_BATCH OUTPUT_BATCH REPACK SYSTEM_INFO"
// says the model is loaded.
//
// Fidelity modes (kl.cpp, compiled into this binary): a first argument
// "tokenize", "kl" or "gen" runs them instead; see kl.cpp.
#include "llama.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#ifndef RIG_FA_TILE_Q
#error "build with -DRIG_FA_TILE_Q=<GGML_FA_TILE_Q of the pinned ggml-cpu> (scripts/setup.sh does)"
#endif

static ggml_type kv_type(const std::string & s) {
    if (s == "q8_0") return GGML_TYPE_Q8_0;
    if (s == "q4_0") return GGML_TYPE_Q4_0;
    if (s == "f32") return GGML_TYPE_F32;
    return GGML_TYPE_F16;
}

static void quiet(ggml_log_level level, const char * text, void *) {
    if (level >= GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

int kl_main(int argc, char ** argv);
int gen_main(int argc, char ** argv);
int tokenize_main(int argc, char ** argv);

int main(int argc, char ** argv) {
    if (argc > 1 && std::string(argv[1]) == "kl") return kl_main(argc, argv);
    if (argc > 1 && std::string(argv[1]) == "tokenize") return tokenize_main(argc, argv);
    if (argc > 1 && std::string(argv[1]) == "gen") return gen_main(argc, argv);
    if (argc != 8 && argc != 9) {
        fprintf(stderr, "usage: %s MODEL CTX THREADS KV_TYPE REPACK IN_FIFO OUT_FIFO [OUTPUT_BATCH]\n", argv[0]);
        return 2;
    }
    const std::string model_path = argv[1];
    const int n_ctx = atoi(argv[2]);
    const int n_threads = atoi(argv[3]);
    const std::string repack = argv[5];
    if (repack != "on" && repack != "off") {
        fprintf(stderr, "REPACK must be on or off, not %s\n", repack.c_str());
        return 2;
    }
    llama_log_set(quiet, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    // The extra buffer types are where the CPU backend's repacked weights
    // live; llama-server's --no-repack turns off the same flag.
    mp.use_extra_bufts = repack == "on";
    llama_model * model = llama_model_load_from_file(model_path.c_str(), mp);
    if (!model) {
        fprintf(stderr, "cannot load %s\n", model_path.c_str());
        return 1;
    }
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = n_ctx;
    // The prompt's physical batch is llama-server's (rig leaves its -ub at
    // the default, 512); the output tokens go in calls of OUTPUT_BATCH.
    cp.n_ubatch = std::min(n_ctx, 512);
    const int output_batch = argc == 9 ? atoi(argv[8]) : RIG_FA_TILE_Q - 1;
    if (output_batch < 1 || output_batch >= RIG_FA_TILE_Q) {
        fprintf(stderr, "OUTPUT_BATCH must be 1..%d (below the flash-attention tile)\n", RIG_FA_TILE_Q - 1);
        return 2;
    }
    cp.n_threads = n_threads;
    cp.n_threads_batch = n_threads;
    cp.type_k = kv_type(argv[4]);
    cp.type_v = kv_type(argv[4]);
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "cannot make a context of %d\n", n_ctx);
        return 1;
    }
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);
    std::ifstream in(argv[6]);
    std::ofstream out(argv[7]);
    std::string info = llama_print_system_info();
    std::replace(info.begin(), info.end(), '\n', ' ');
    out << "ready " << llama_n_ctx(ctx) << " " << n_vocab << " " << llama_n_ubatch(ctx) << " " << output_batch << " " << repack << " " << info << std::endl;
    std::string line;
    std::vector<float> lp(n_vocab);
    std::vector<int> order(n_vocab);
    while (std::getline(in, line)) {
        std::istringstream ss(line);
        std::string cmd, row;
        ss >> cmd;
        if (cmd == "quit") break;
        if (cmd != "score") {
            out << "error - unknown command " << cmd << std::endl;
            continue;
        }
        int k = 0, np = 0, no = 0;
        ss >> row >> k >> np >> no;
        std::vector<llama_token> toks(np + no);
        for (auto & t : toks) ss >> t;
        if (!ss || np < 1 || no < 1 || k < 0) {
            out << "error " << row << " malformed request" << std::endl;
            continue;
        }
        if (np + no > (int) llama_n_ctx(ctx)) {
            out << "error " << row << " " << np + no << " tokens is past the context of " << llama_n_ctx(ctx) << std::endl;
            continue;
        }
        bool bad = false;
        for (auto t : toks) bad = bad || t < 0 || t >= n_vocab;
        if (bad) {
            out << "error " << row << " a token id is outside the vocabulary of " << n_vocab << std::endl;
            continue;
        }
        llama_memory_clear(llama_get_memory(ctx), true);
        // The prompt goes in as llama-server sent it, one call split into
        // its physical batches, with only its last position's logits; the
        // output tokens follow in calls below the attention tile, each
        // position's logits kept. Answers are formatted first and sent
        // whole, so a failed call sends nothing but its error.
        std::string answer = "row " + row + " " + std::to_string(no) + "\n";
        char buf[64];
        int step = 0;
        auto emit = [&](const float * logits) {
            float mx = -INFINITY;
            for (int v = 0; v < n_vocab; v++) mx = std::max(mx, logits[v]);
            double sum = 0;
            for (int v = 0; v < n_vocab; v++) sum += std::exp((double) logits[v] - mx);
            const double lse = mx + std::log(sum);
            for (int v = 0; v < n_vocab; v++) lp[v] = (float) (logits[v] - lse);
            const int kk = std::min(k, n_vocab);
            for (int v = 0; v < n_vocab; v++) order[v] = v;
            std::partial_sort(order.begin(), order.begin() + kk, order.end(), [&](int a, int c) { return logits[a] > logits[c]; });
            snprintf(buf, sizeof buf, "%.9g", lp[toks[np + step]]);
            answer += std::to_string(step) + " " + buf;
            for (int i = 0; i < kk; i++) {
                snprintf(buf, sizeof buf, " %d:%.9g", order[i], lp[order[i]]);
                answer += buf;
            }
            answer += "\n";
            step++;
        };
        // decode runs positions [from, from+n) and emits the logits of those
        // marked; the first call is the prompt, the rest the output chunks.
        auto decode = [&](int from, int n, bool all_logits) {
            llama_batch b = llama_batch_init(n, 0, 1);
            b.n_tokens = n;
            for (int j = 0; j < n; j++) {
                b.token[j] = toks[from + j];
                b.pos[j] = from + j;
                b.n_seq_id[j] = 1;
                b.seq_id[j][0] = 0;
                b.logits[j] = all_logits || j == n - 1;
            }
            const bool ok = llama_decode(ctx, b) == 0;
            if (ok) {
                for (int j = 0; j < n; j++) {
                    if (all_logits || j == n - 1) emit(llama_get_logits_ith(ctx, j));
                }
            }
            llama_batch_free(b);
            return ok;
        };
        bool ok = decode(0, np, false);
        // The output tokens but the last predict the steps after the first.
        for (int from = np; ok && from < np + no - 1; from += output_batch) {
            ok = decode(from, std::min(output_batch, np + no - 1 - from), true);
        }
        if (!ok) {
            out << "error " << row << " decode failed" << std::endl;
            continue;
        }
        out << answer;
        out.flush();
    }
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
