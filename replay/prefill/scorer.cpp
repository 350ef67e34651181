// rig-prefill-score: scores kept tokens in one batched forward pass through
// libllama, the library the pinned llama-server is built on (the same source
// tree and flags; scripts/setup.sh builds it beside the server). rig's
// prefill replay drives it; it is not a general tool.
//
// Usage: rig-prefill-score MODEL CTX THREADS KV_TYPE IN_FIFO OUT_FIFO [UBATCH]
//
// UBATCH is the largest physical batch. Its default is one below the CPU
// flash-attention kernel's query tile (GGML_FA_TILE_Q in the pinned ggml,
// passed in by setup as RIG_FA_TILE_Q): a batch of that many queries or more
// takes the tiled kernel, which accumulates in F32, while the decode steps
// that made the record take the one-query kernel, which accumulates V in
// F16. Measured on SmolLM2 Q4_1: below the tile a row scores within about
// 3e-4 nats of its decode steps; at the tile and above, 0.2 nats and more.
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
// A first line "ready N_CTX N_VOCAB UBATCH SYSTEM_INFO" says the model is
// loaded.
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

int main(int argc, char ** argv) {
    if (argc != 7 && argc != 8) {
        fprintf(stderr, "usage: %s MODEL CTX THREADS KV_TYPE IN_FIFO OUT_FIFO [UBATCH]\n", argv[0]);
        return 2;
    }
    const std::string model_path = argv[1];
    const int n_ctx = atoi(argv[2]);
    const int n_threads = atoi(argv[3]);
    llama_log_set(quiet, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    llama_model * model = llama_model_load_from_file(model_path.c_str(), mp);
    if (!model) {
        fprintf(stderr, "cannot load %s\n", model_path.c_str());
        return 1;
    }
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = n_ctx;
    cp.n_ubatch = std::min(n_ctx, argc == 8 ? atoi(argv[7]) : RIG_FA_TILE_Q - 1);
    if (cp.n_ubatch < 1) {
        fprintf(stderr, "UBATCH must be at least 1\n");
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
    std::ifstream in(argv[5]);
    std::ofstream out(argv[6]);
    std::string info = llama_print_system_info();
    std::replace(info.begin(), info.end(), '\n', ' ');
    out << "ready " << llama_n_ctx(ctx) << " " << n_vocab << " " << llama_n_ubatch(ctx) << " " << info << std::endl;
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
        llama_batch b = llama_batch_init(np + no, 0, 1);
        b.n_tokens = np + no;
        for (int i = 0; i < np + no; i++) {
            b.token[i] = toks[i];
            b.pos[i] = i;
            b.n_seq_id[i] = 1;
            b.seq_id[i][0] = 0;
            // The logits that predict each output token: the positions from
            // the prompt's last token to the output's last but one.
            b.logits[i] = i >= np - 1 && i < np + no - 1;
        }
        if (llama_decode(ctx, b) != 0) {
            llama_batch_free(b);
            out << "error " << row << " decode failed" << std::endl;
            continue;
        }
        out << "row " << row << " " << no << "\n";
        char buf[64];
        for (int s = 0; s < no; s++) {
            const float * logits = llama_get_logits_ith(ctx, np - 1 + s);
            float mx = -INFINITY;
            for (int v = 0; v < n_vocab; v++) mx = std::max(mx, logits[v]);
            double sum = 0;
            for (int v = 0; v < n_vocab; v++) sum += std::exp((double) logits[v] - mx);
            const double lse = mx + std::log(sum);
            for (int v = 0; v < n_vocab; v++) lp[v] = (float) (logits[v] - lse);
            const int kk = std::min(k, n_vocab);
            for (int v = 0; v < n_vocab; v++) order[v] = v;
            std::partial_sort(order.begin(), order.begin() + kk, order.end(), [&](int a, int c) { return logits[a] > logits[c]; });
            snprintf(buf, sizeof buf, "%.9g", lp[toks[np + s]]);
            out << s << " " << buf;
            for (int i = 0; i < kk; i++) {
                snprintf(buf, sizeof buf, " %d:%.9g", order[i], lp[order[i]]);
                out << buf;
            }
            out << "\n";
        }
        out.flush();
        llama_batch_free(b);
    }
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
