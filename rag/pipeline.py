"""The one API the CLI, the UI and the eval call: `build_index(settings)` and `Assistant(settings)`.

`Assistant.stream(question)` yields the answer's text as it is generated, then the final `Answer` (whose text may
differ: invalid markers removed, citations re-pointed, or an extractive fallback). `ask` returns just the Answer,
`search` just the hits. Models are loaded once, lazily or by `warm()`, and all model compute (embedder and LLM)
runs under one lock: on a few cores, the two at once slow each other down far more than taking turns.
"""

from __future__ import annotations

import logging
import math
import re
import threading
import time
import weakref
from collections import abc
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

from . import answer as A
from . import compose, conversation, presets, support
from . import question as Q
from .answerable import answerability, gate, of_one
from .catalog import Catalog
from .config import Answering, Settings
from .embed import Embedder, load_embedder
from .evidence import (
    SentenceScorer,
    best_sentence_score,
    collection_blocks,
    relevant_papers,
    select_evidence,
    told_apart,
    what_each_does,
)
from .generate import Generator, LlamaGenerator, Message
from .gguf import resolve_model
from .index import check_unlocked, index_generation, open_reader
from .indexer import IngestSummary, Progress, build_index
from .prompts import Prompts, load_prompts
from .records import CANNOT_ANSWER, Answer, Citation, Evidence, Hit, Paper, StoreError
from .retrieve import Filters, Retrieved, Retriever
from .sanitize import sanitize_source
from .text import expansion_of, mend_numbers, own_long_names, split_sentences, tokens, written_in

log = logging.getLogger(__name__)

__all__ = ["Assistant", "build_index", "IngestSummary", "Filters", "Event"]

Event = str | Answer  # a piece of streamed text, or the final Answer (always last)
_COLLECTION_MORE = 40  # "List all papers": papers listed under the answer past the first ones (the Search tab has all)
_TITLED_AMONG = 3  # a short follow-up is about another paper when one of the first three opens with its words
# A small model's preamble ("The answer is:", "Answer:", "The sources mentioned in the answer are:", "The source is
# [1] ...") is not part of the answer; nor is a whole sentence saying only where the answer lies ("The answer to this
# question lies in the context of language modeling."), whose verb a cut preamble would leave opening the answer
# ("lies in ...").
_PREAMBLE = re.compile(r"^\s*(?:(the )?answer to (this|the) question lies in\b[^.!?\n]*[.!?]|"
                       r"(the )?(final )?answer\b( to (this|the) question)?(\s*is\b\s*[:,-]?|\s*[:,-]|[ \t]*(?=\n))|"
                       r"(the )?sources?( mentioned| cited| used)?( in (the|this) answer)?( are| is)?"
                       r"\s*(?::|(?=\[\d)))\s*",
                       re.IGNORECASE)



class Assistant:
    def __init__(self, settings: Settings, embedder: Embedder | None = None, generator: Generator | None = None,
                 prompts: Prompts | None = None) -> None:
        self.settings = settings
        self.prompts = prompts or load_prompts(settings.paths.prompts_dir)
        self._embedder = embedder
        self._generator = generator
        # One lock for all model compute. A plain Lock: a stream may be resumed from another thread.
        self.compute = threading.Lock()
        self._retriever: Retriever | None = None
        self._generation: str | None = None  # the published id of the index generation the retriever reads
        self._following = threading.Lock()  # one follow_index at a time
        self._opening = threading.Lock()  # the index is opened once, however many first questions arrive at once
        self._follower: threading.Thread | None = None
        self._scorer: SentenceScorer | None = None
        self.fingerprint = settings.fingerprint()

    # --- loading ------------------------------------------------------------------------------------------------

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = load_embedder(self.settings.embedding, cache_dir=self.settings.paths.data_dir)
        return self._embedder

    @property
    def generator(self) -> Generator:
        if self._generator is None:
            self._generator = self._new_generator(self.settings)
        return self._generator

    @staticmethod
    def _new_generator(settings: Settings) -> Generator:
        """The chat model `settings` name: an OpenAI-compatible server (`generation.remote_url`) or the local GGUF."""
        if settings.generation.remote_url:  # an OpenAI-compatible server instead of the local GGUF
            from .remote import RemoteGenerator

            return RemoteGenerator(settings.generation)
        # The data folder holds the faster Q8_0 copy of a Q4 GGUF (generation.quantize), made once.
        return LlamaGenerator(settings.generation, settings.paths.data_dir)

    @property
    def model_source(self) -> Path | None:
        """The GGUF the chat model is (or will be) loaded from, found without loading it; None for a remote server
        or a generator built elsewhere without a file."""
        if self._generator is not None:
            source = getattr(self._generator, "source", None)
            return source if isinstance(source, Path) else None
        if self.settings.generation.remote_url:
            return None
        return resolve_model(self.settings.generation, self.settings.paths.data_dir)

    @property
    def model_name(self) -> str:
        """The chat model's name as answers report it; a GGUF's file name while it is not loaded."""
        source = self.model_source if self._generator is None else None
        return source.name if source is not None else self.generator.name

    def lists_without_model(self, question: str) -> bool:
        """Is `question`, asked without history, a summary listed from the evidence alone, so that answering it
        needs no GGUF loaded?"""
        return _listed_from_evidence(Q.read(question, alone=True), self.answering())

    def use_generator(self, generator: Generator) -> None:
        """Swap the chat model for one built elsewhere (tests, eval's recorder); waits for any generation in flight."""
        with self.compute:
            self._generator = generator

    def use_model(self, model_path: str) -> None:
        """Switch the chat model (the UI's model picker) to the GGUF at `model_path` ("" = the default), built as the
        settings say (with `generation.remote_url` that server's model is used, as at start-up); the settings then
        name it. It loads before the compute lock is taken, so answers go on meanwhile; the swap waits for any
        generation in flight. A model that cannot be loaded raises (ModelError) and leaves the current one in place."""
        settings = self.settings.with_values({"generation.model_path": model_path})
        generator = self._new_generator(settings)
        with self.compute:
            self._generator, self.settings = generator, settings

    @property
    def retriever(self) -> Retriever:
        retriever = self._retriever
        if retriever is None:
            # Several first questions at once (the API's threads) open it once: opening it in each thread at the
            # same time also ran numpy's header parsing (ast) concurrently, which CPython 3.11.7 can fail with
            # "SystemError: AST constructor recursion depth mismatch".
            with self._opening:
                retriever = self._retriever
                if retriever is None:
                    retriever, generation = self._open_index()
                    self._scorer = SentenceScorer(self.embedder, self.settings.answer)
                    self._retriever, self._generation = retriever, generation
                    self._follow_in_background()
        return retriever

    def _open_index(self) -> tuple[Retriever, str | None]:
        """A retriever over the current index generation, leased (index.open_reader) until the retriever is
        garbage: whoever still holds it (an answer in flight) can use it after the app has moved on."""
        reader = open_reader(self.settings, self.embedder)
        retriever = Retriever(self.embedder, reader.store, reader.lexical, reader.catalog, self.settings.retrieval)
        weakref.finalize(retriever, reader.close)
        return retriever, reader.generation

    @property
    def catalog(self) -> Catalog:
        return self.retriever.catalog

    def reload_index(self) -> None:
        self._retriever = None

    def follow_index(self) -> bool:
        """Between questions: when an ingest has published a new index generation since this one was opened, open
        it (outside the compute lock: answers go on meanwhile) and swap it in under the lock, so no retrieval is
        cut in two. True when it switched. An answer already past retrieval keeps what it retrieved."""
        with self._following:
            if self._retriever is None:
                return False
            try:
                published = index_generation(self.settings)
            except StoreError:  # a damaged catalog: the next question says so
                return False
            if published is None or published == self._generation:
                return False  # None: nothing published (an index made before generation ids)
            retriever, generation = self._open_index()
            with self.compute:
                self._retriever, self._generation = retriever, generation
        log.info("index generation %s opened", generation)
        return True

    def _follow_in_background(self) -> None:
        """Check every `store.follow_s` (a daemon thread holding this assistant weakly), so an idle app lets go of
        an old generation and the writer can collect it."""
        every = self.settings.store.follow_s
        if every <= 0 or self._follower is not None:
            return
        me = weakref.ref(self)

        def loop() -> None:
            said = ""
            while True:
                time.sleep(every)
                assistant = me()
                if assistant is None:
                    return
                try:
                    assistant.follow_index()
                except Exception as e:  # e.g. the new generation failed its check: the next question says so
                    if str(e) != said:  # once, not every few seconds
                        log.warning("could not open the new index generation: %s", e)
                    said = str(e)
                del assistant

        self._follower = threading.Thread(target=loop, name="rag-follow-index", daemon=True)
        self._follower.start()

    def warm(self) -> None:
        """Load everything and run one tiny completion, so the first user question pays no load cost."""
        _ = self.retriever
        with self.compute:
            for _piece in self.generator.stream([{"role": "user", "content": "Hi"}], max_tokens=1, temperature=0.0):
                pass

    # --- asking -------------------------------------------------------------------------------------------------

    def search(self, question: str, filters: Filters | None = None, top_k: int | None = None,
               mode: str | None = None) -> Retrieved:
        question, _ = A.truncate_question(question)
        with self.compute:
            return self.retriever.search(question, filters, top_k=top_k, mode=mode)

    def read(self, question: str, history: list[Message] | None = None) -> Q.Question:
        """The question read once and completed with what the conversation and the corpus say about it.

        e.g. "And how large were its gains?" after an answer citing AREW -> searched "And how large were its gains?
        (about: AREW: ...)", pinned (AREW's id,); "and which papers use diffusion?" -> searched as it is (a new
        subject is not pinned to the old paper).
        """
        question, _ = A.truncate_question(question)
        with self.compute:
            return self._read(self.retriever.respelt(question), _turns(history))

    def _read(self, question: str, history: list[Message]) -> Q.Question:
        """`read` with the compute lock held, of a question already spelt as the abstracts spell it
        (`Retriever.respelt`: "which papers study generalisation?" had been declined over abstracts writing
        "generalization")."""
        q = Q.read(question, alone=not history)
        question = q.text  # searched as what it requests: "list the papers about ...", not "Can you list ..."
        focus = conversation.resolve(question, q, history, self._locate, self._first, self._words, self._named,
                                     self._topical, self._found, self._titled)
        if focus.papers:
            papers = self.retriever.catalog.get_many(focus.papers)
            titles = "; ".join(papers[p].title for p in focus.papers if p in papers)
            asked = question
            if Q.only_points(question):  # "And the first one?": the last question, asked of that paper
                asked = next((m["content"] for m in reversed(history) if m.get("role") == "user"), question)
                q = Q.read(asked)
            q = q.in_context(f"{asked} (about: {titles[:400]})", focus.papers, focus.described, focus.side_by_side,
                             focus.in_order)
        else:
            q = q.in_context(focus.searched, past=focus.past)
        return q.in_corpus(self.retriever.absent_terms(question), self.retriever.rare_terms(q.searched),
                           self.retriever.unmentioned(q.topic_words) if q.exists or q.exists_first else ())

    def retrieve(self, question: Q.Question, filters: Filters | None = None, top_k: int | None = None) -> Retrieved:
        """The papers a read question is answered from: the ones it points back at when it does ("it", "the second
        one", "compare them"), and more of them for a summary."""
        with self.compute:
            return self._retrieve(question, filters, top_k)

    def _retrieve(self, q: Q.Question, filters: Filters | None, top_k: int | None) -> Retrieved:
        if q.pinned:
            filters = replace(filters or Filters(), paper_ids=frozenset(q.pinned))
        # Every pinned paper is a candidate: "Which of them ...?" after a list of eight picks among all eight.
        top_k = max(top_k or self.settings.retrieval.top_k, self.settings.answer.summary_candidates if q.summary else 0,
                    len(q.pinned))
        named = self._paper_named(q)
        if named and not (filters and filters.paper_ids and named not in filters.paper_ids):
            only = self.retriever.search(q.searched, replace(filters or Filters(), paper_ids=frozenset({named})),
                                         top_k=top_k)
            if only.hits:
                return only
        retrieved = self.retriever.search(q.searched, filters, top_k=top_k)
        if q.described and len(q.pinned) > 1:
            retrieved = replace(retrieved, hits=told_apart(q.text, retrieved.hits))
        return retrieved

    def _paper_named(self, q: Q.Question) -> str | None:
        """The one paper a question names ("what problem does FoundObj solve?", "is TIED model-based?", "rhi - what
        does it guarantee?"): it is about that paper, however well another one's sentences match its other words. Of
        the words typed in lower case, those few papers use (read once: `q.rare`). None for a follow-up pinned to
        earlier papers, a summary or a comparison."""
        if q.pinned or q.summary or q.compares:
            return None
        return self.retriever.paper_named(Q.names_as_written(q.text), [w for w in Q.typed_lower(q.text) if w in q.rare])

    def _words(self, paper_id: str) -> set[str]:
        """A paper's words, as questions are read (`text.tokens`), a slashed one also written whole ("I/O" is "io",
        as a follow-up types it: "and the io cost?")."""
        paper = self.retriever.catalog.get_many([paper_id]).get(paper_id)
        if paper is None:
            return set()
        text = paper.raw + " " + paper.title
        return set(tokens(text)) | set(tokens(re.sub(r"(?<=\w)/(?=\w)", "", text)))

    def _topical(self, word: str) -> bool:
        """Could the word name what a paper is about: an indexed word fewer than a third of the papers write (BM25's
        idf above log 3)? Not a typo no abstract writes ("startng"), nor "over"."""
        lexical = self.retriever.lexical
        return lexical is None or lexical.idf([word]).get(word, 0.0) > math.log(3)

    def _found(self, text: str) -> bool:
        """Does a text alone retrieve a chunk as close as the unanswerable gate asks (`retrieval.min_similarity`)?"""
        hits = self.retriever.search(text, top_k=self.settings.retrieval.top_k).hits
        return any(h.best_similarity >= self.settings.retrieval.min_similarity for h in hits)

    def _titled(self, text: str, words: set[str], paper_id: str) -> bool:
        """Does one of the first few papers a text alone retrieves, other than `paper_id`, write every one of `words`
        in its title or opening sentence, where a paper says what it is about ("contrastive learning?" -> "Why does
        contrastive learning with simple images ...")?"""
        if not words:
            return False
        hits = self.retriever.search(text, top_k=_TITLED_AMONG).hits
        return any(h.paper.paper_id != paper_id and all(written_in(w, _lead(h.paper)) for w in words) for h in hits)

    def _first(self, text: str) -> str | None:
        """The paper a text alone retrieves first."""
        return next((h.paper.paper_id for h in self.retriever.search(text, top_k=1).hits), None)

    def _collection(self, filters: Filters | None) -> tuple[Retrieved, int]:
        """The first papers of the collection (those passing `filters`) in source order, as hits, and how many there
        are, for "List all papers" (no topic to search)."""
        catalog, limit = self.retriever.catalog, self.settings.answer.summary_max_papers + _COLLECTION_MORE
        if filters:
            ids = catalog.ids_where(filters.sources, filters.has_code, filters.paper_ids)
            papers = sorted(catalog.get_many(ids).values(), key=lambda p: (p.source, p.position))
            found, total = papers[:limit], len(ids)
        else:
            found, total = catalog.find(limit=limit), catalog.count()
        return Retrieved([Hit(p, 0.0) for p in found]), total

    def _named(self, name: str) -> str | None:
        """The paper a name few papers use ("SOLAR", "R2G") belongs to: the one whose text holds it best."""
        lexical = self.retriever.lexical
        if lexical is None:
            return None
        for word in self.retriever.rare_terms(name):  # "stt-llm", or else "stt"
            found = lexical.search(word, k=1)
            if found and word in self._words(found[0][1]):
                return found[0][1]
        return None

    def _locate(self, sentence: str) -> str | None:
        """The paper that states an earlier answer's sentence (that sentence was checked against it)."""
        found = self.retriever.search(sentence, top_k=1)
        if found.hits and found.hits[0].best_similarity >= self.settings.answer.locate_similarity:
            return found.hits[0].paper.paper_id
        return None

    def _generate(self, generator: Generator, messages: list[Message], max_tokens: int, temperature: float,
                  stop: list[str] | None) -> Iterator[str]:
        """`generator.stream`, entered with the compute lock held. A generator that runs elsewhere (a remote server:
        `runs_elsewhere`) streams with the lock released, so other questions retrieve meanwhile and several answers
        generate at once (as many as the generator allows); the lock is taken back before the answer is checked."""
        if not getattr(generator, "runs_elsewhere", False):
            yield from generator.stream(messages, max_tokens, temperature, stop=stop)
            return
        self.compute.release()
        try:
            yield from generator.stream(messages, max_tokens, temperature, stop=stop)
        finally:
            self.compute.acquire()


    def _draft(self, generator: Generator, budget: A.Budgeted, temperature: float, summary: bool,
               timings: dict[str, float], t0: float, hold_markers: bool = False) -> abc.Generator[str, None, str]:
        """Stream the model's draft piece by piece; returns it whole, with its timings written into `timings`. With
        `hold_markers`, a draft opening with source markers alone is held back until it says something: "[1]" alone
        is asked again, and the reader never sees it."""
        pieces: list[str] = []
        first: float | None = None
        held = ""
        t = time.perf_counter()
        # A blank line ends the answer: past it a small model starts lists and explanations it makes up.
        for piece in self._generate(generator, budget.messages, budget.max_tokens, temperature,
                                    stop=None if summary else ["\n\n"]):
            if first is None:
                first = time.perf_counter()
                timings["first_token_ms"] = (first - t0) * 1000
            pieces.append(piece)
            if hold_markers:
                held += piece
                if _MARKERS_SO_FAR.fullmatch(held):  # "[", "[1", "[1]." so far
                    continue
                piece, held, hold_markers = held, "", False
            yield piece
        end = time.perf_counter()
        n_out = len(pieces)
        timings["generate_ms"] = (end - t) * 1000
        timings["tokens_per_s"] = (n_out - 1) / (end - first) if first and n_out > 1 and end > first else 0.0
        return "".join(pieces).strip()

    def ask(self, question: str, history: list[Message] | None = None, filters: Filters | None = None,
            top_k: int | None = None, temperature: float | None = None, max_tokens: int | None = None) -> Answer:
        final: Answer | None = None
        for event in self.stream(question, history, filters, top_k, temperature, max_tokens):
            if isinstance(event, Answer):
                final = event
        assert final is not None
        return final

    def stream(self, question: str, history: list[Message] | None = None, filters: Filters | None = None,
               top_k: int | None = None, temperature: float | None = None,
               max_tokens: int | None = None) -> Iterator[Event]:
        """Yield answer text as it is generated, then the final Answer. Per-call overrides leave settings alone."""
        _ = self.retriever  # loading is start-up cost, not question latency (the GGUF: when it is first needed)
        t0 = time.perf_counter()
        gen, ans = self.settings.generation, self.settings.answer
        temperature = gen.temperature if temperature is None else float(temperature)
        max_tokens = gen.max_tokens if max_tokens is None else int(max_tokens)
        question, notice = A.truncate_question(question)
        typed, question = question, self.retriever.respelt(question)  # the answer reports the question as typed
        notices = [notice] if notice else []
        more: list[Evidence] = []  # a summary's papers on the topic past those it lists
        saturated = False  # every paper a summary judged was on its topic: there may be more
        total = 0  # "List all papers": how many there are
        none_on_topic = False  # a summary found no paper clearly on its topic and shows the closest
        history = _turns(history)
        with self.compute:
            q = self._read(question, history)
            searched, pinned, summary = q.searched, q.pinned, q.summary
            if q.past:  # "the second one" after an answer citing one paper: nothing to search
                yield self._abstain(typed, searched, [], {"total_ms": (time.perf_counter() - t0) * 1000},
                                    self.model_name, notices, compose.past_the_list(q))
                return
            if q.collection:
                retrieved, total = self._collection(filters)
            else:
                retrieved = self._retrieve(q, filters, top_k)
                q = _term_or_paper(q, retrieved.hits)
            timings = dict(retrieved.timings)
            model_name = self.model_name
            reason = None if q.collection else gate(q, retrieved.hits, self.settings.retrieval.min_similarity)
            if reason:
                notices.append(reason)
                timings["total_ms"] = (time.perf_counter() - t0) * 1000
                yield self._abstain(typed, searched, retrieved.hits, timings, model_name, notices,
                                    compose.declined(q))
                return
            t = time.perf_counter()
            assert self._scorer is not None
            if q.collection:  # "List all papers": the collection in source order, the rest under the answer
                blocks = collection_blocks(retrieved.hits)
                blocks, more = blocks[:ans.summary_max_papers], blocks[ans.summary_max_papers:]
            else:
                # Sentences are scored against the question itself for a pinned follow-up (`Question.scored`).
                qvec = self.embedder.embed([question])[0] if pinned else retrieved.query_vector
                assert qvec is not None
                if summary and pinned:
                    if not Q.compared_on(question):  # "compare them": what each one does
                        blocks = what_each_does(q, qvec, retrieved.hits, self._scorer, ans)
                    else:
                        blocks = select_evidence(q, qvec, retrieved.hits, self._scorer, max_papers=len(pinned),
                                                 per_paper=1, margin=float("inf"))
                    if q.in_order:
                        # two papers asked about at once ("AREW and the rollout-shaping paper"): in the order the
                        # user gave them, so that "the first one" next is the first the user meant
                        order = {p: i for i, p in enumerate(q.pinned)}
                        blocks = [replace(b, n=n) for n, b in enumerate(
                            sorted(blocks, key=lambda b: order.get(b.hit.paper.paper_id, len(order))), start=1)]
                elif summary:
                    lexical = self.retriever.lexical
                    idf: Callable[[list[str]], dict[str, float]] = \
                        lexical.idf_or_kin if lexical is not None else (lambda words: {})
                    blocks = relevant_papers(q, qvec, retrieved.hits, self._scorer, idf, ans, closest_if_none=False)
                    if not blocks:  # none is clearly on the topic: the closest, said to be only that
                        none_on_topic = True
                        blocks = relevant_papers(q, qvec, retrieved.hits[:1], self._scorer, idf, ans)
                    saturated = len(retrieved.hits) >= ans.summary_candidates and len(blocks) == len(retrieved.hits)
                    if saturated:
                        notices.append(f"all {len(blocks)} papers judged were on this topic, so more may be: the "
                                       "Search tab ranks every paper, or ask about a narrower topic")
                    blocks, more = blocks[:ans.summary_max_papers], blocks[ans.summary_max_papers:]
                else:
                    lexical = self.retriever.lexical
                    blocks = select_evidence(q, qvec, retrieved.hits, self._scorer, max_papers=ans.evidence_papers,
                                             per_paper=ans.sentences_per_paper, margin=ans.evidence_margin,
                                             idf=lexical.idf if lexical is not None else None,
                                             cover_weight=ans.evidence_cover_weight,
                                             focus_weight=ans.evidence_focus_weight,
                                             expansion=retrieved.expansion,
                                             expansion_weight=self.settings.retrieval.glossary_weight)
                    # The right paper was found, but what is asked for is not in it ("how many GPUs ...?").
                    reason, part = answerability(q, [b.hit.paper for b in blocks])
                    if reason:
                        timings["total_ms"] = (time.perf_counter() - t0) * 1000
                        one = pinned[0] if len(pinned) == 1 else self._paper_named(q)
                        said = of_one(reason) if len(blocks) == 1 and blocks[0].hit.paper.paper_id == one else None
                        if said:  # a question on one paper (pinned or named): its abstract is what does not say it
                            yield self._not_in_paper(typed, searched, retrieved.hits, blocks[0], said, timings,
                                                     notices)
                        else:
                            yield self._abstain(typed, searched, retrieved.hits, timings, model_name,
                                                notices + [reason])
                        return
                    if part:
                        notices.append(f"{part}, so one part of the question is not answered")
            knobs = self.answering()
            listing = summary and not pinned
            final: tuple[str, str, list, int]  # text, mode, checks, markers dropped
            if _listed_from_evidence(q, knobs):
                budget = A.Budgeted([], blocks, 0, 0, 0, 0)
                final = (compose.summary([], blocks, q, knobs)[0], "extractive", [], 0)
            else:
                t_load = time.perf_counter()
                generator = self.generator  # loaded here the first time: start-up cost, not this answer's
                loaded = time.perf_counter() - t_load
                t0, t = t0 + loaded, t + loaded
                shown = history[-2 * ans.history_turns:] if ans.history_turns > 0 else []
                # Without the earlier turns the model needs the standalone question ("it" -> what "it" was).
                asked = question if shown or searched == question else searched
                template = "summary" if summary else "user"
                budget = A.fit_budget(generator, self.prompts, blocks, asked, shown, max_tokens, template,
                                      examples=ans.worked_example == "always")
                if listing:  # papers the context could not hold are still on the topic: first of the rest
                    more = blocks[len(budget.blocks):] + more
                timings["prompt_ms"] = (time.perf_counter() - t) * 1000
                timings["prompt_tokens"] = budget.prompt_tokens
                retry = ans.worked_example == "retry" and not (summary or q.which) and bool(self.prompts.examples)
                raw = yield from self._draft(generator, budget, temperature, summary, timings, t0, hold_markers=retry)
                if retry and raw and _MARKERS_SO_FAR.fullmatch(raw):
                    # "[1]" alone: a small model pointing at its source instead of answering; asked again with the
                    # worked example as a turn of its own, it answers in words (bench/RESULTS.md, stop 61). Not
                    # for "which paper ...?", answered by the paper's name from the evidence either way.
                    budget = A.fit_budget(generator, self.prompts, blocks, asked, shown, max_tokens, template,
                                          examples=True)
                    raw = yield from self._draft(generator, budget, temperature, summary, timings, t0)
                final = self._finish(raw, budget.blocks, q)
        timings["total_ms"] = (time.perf_counter() - t0) * 1000
        text, mode, checks, dropped = final
        abstained = mode == "abstained"
        said_absent = not abstained and compose.says_none(q, listing, none_on_topic)
        if q.unmentioned and not abstained and not pinned:
            # "Is there a paper on speculative decoding?": the closest paper is shown, and said to be only that.
            missing = ", ".join(q.unmentioned)
            if listing:
                notices.append(f"no abstract mentions {missing}: these are the closest papers")
                if q.exists and none_on_topic:  # "Any papers on protein folding?": the answer says no, then the rest
                    text = f"No abstract mentions {missing}; the closest papers:\n{text}"
                    said_absent = True
            else:
                text = f"No abstract mentions {missing}; the closest: {text}"
                said_absent = True
        if not abstained:
            text = compose.framed(text, q, listing, len(budget.blocks) + len(more), total, saturated, none_on_topic)
        if none_on_topic and listing and "count" not in q.asks and not abstained:
            notices.append("no paper is clearly on this topic: this is the closest")
        if budget.dropped_blocks and not listing:
            notices.append(f"{budget.dropped_blocks} evidence block(s) dropped to fit the model's context")
        if more:
            notices.append(f"{len(more)} more {'paper' if len(more) == 1 else 'papers'} "
                           f"{'' if q.collection else 'on this topic, '}listed under the answer"
                           + ("; the Search tab lists every one" if q.collection else ""))
        if budget.dropped_turns:
            notices.append(f"{budget.dropped_turns} earlier turn(s) left out to fit the model's context")
        yield Answer(
            question=typed, text=text, citations=() if abstained else tuple(A.citations_for(text, budget.blocks)),
            hits=tuple(retrieved.hits), abstained=abstained, timings=timings, model=self.model_name,
            settings_fingerprint=self.fingerprint, prompt_version=self.prompts.version, searched=searched, mode=mode,
            focus=pinned, dropped_markers=dropped, dropped_evidence=budget.dropped_blocks, checks=tuple(checks),
            notices=tuple(notices), evidence=tuple(budget.blocks),
            more=() if abstained else tuple(Citation(n=len(budget.blocks) + i, paper=b.hit.paper,
                                                     supporting=b.sentences) for i, b in enumerate(more, start=1)),
            said_absent=said_absent,
        )

    def answering(self) -> Answering:
        """The answer settings for the chat model in use: its preset's measured `[answer]` values (`Preset.answer`)
        for the settings left unset, and `judge_beyond_question = "auto"` decided by them ("off" without)."""
        knobs = self.settings.answer
        source = self.model_source
        preset = presets.of_file(source) if source is not None else None
        profile = dict(preset.answer) if preset else {}
        update = {k: v for k, v in profile.items() if k not in knobs.model_fields_set}
        if knobs.judge_beyond_question == "auto":
            update["judge_beyond_question"] = profile.get("judge_beyond_question", "off")
        return knobs.model_copy(update=update) if update else knobs  # the presets' values are typed in the code

    def _finish(self, raw: str, blocks: list, q: Q.Question) -> tuple[str, str, list, int]:
        """(text, mode, checks, dropped markers) for the model's raw output: the answer first, every sentence
        checked against its source; when none survives, the one evidence clause that holds what was asked."""
        knobs = self.answering()
        valid = {b.n for b in blocks}
        raw = mend_numbers(_PREAMBLE.sub("", raw), " ".join(b.hit.paper.abstract for b in blocks))
        text, dropped = A.parse_markers(raw, valid)
        strong = (best_sentence_score(blocks)
                  >= self.settings.retrieval.min_similarity + knobs.strong_evidence_margin)
        if CANNOT_ANSWER.lower().rstrip(".") in text.lower() and not q.summary:
            if strong:  # the model gave up on evidence that is there: answer from it instead
                return compose.fallback(blocks, q, knobs=knobs), "extractive", [], dropped
            return CANNOT_ANSWER, "abstained", [], dropped
        assert self._scorer is not None
        papers = self._scorer.sentences([b.hit for b in blocks])
        known = f"{q.text} {discussed(q, blocks)}".rstrip()
        sentences, checks = support.check(text, known, blocks, self.embedder, papers, knobs,
                                          instructions=self.prompts.system)
        if q.summary:
            text, wrote = compose.summary(checks, blocks, q, knobs)
            return text, "generated" if wrote else "extractive", [c for c in checks if c.supported], dropped
        text, mode, shown = compose.factoid(sentences, checks, blocks, q, raw, knobs)
        return text, mode, checks if mode == "generated" else [], dropped

    def _not_in_paper(self, question: str, searched: str, hits: list[Hit], block: Evidence, said: str,
                      timings: dict[str, float], notices: list[str]) -> Answer:
        """A question on one paper whose abstract does not hold what is asked ("how many images?" after the
        cell-painting paper, "What are the main limitations of SERA?"): the answer says so of that paper and cites
        it, so the reader can check, rather than declining as if no paper were in question."""
        paper = block.hit.paper
        name = compose.head_of(sanitize_source(paper.title).rstrip(" .")) if not paper.title_is_opening \
            else "this paper"
        text = f"The abstract of {name} {said} [1]."
        return Answer(
            question=question, text=text, citations=(Citation(n=1, paper=paper, supporting=block.sentences),),
            hits=tuple(hits[:3]), abstained=False, timings=timings, model=self.model_name,
            settings_fingerprint=self.fingerprint, prompt_version=self.prompts.version, searched=searched,
            mode="extractive", focus=(paper.paper_id,), notices=tuple(notices), evidence=(replace(block, n=1),),
            said_absent=True,
        )

    def _abstain(self, question: str, searched: str, hits: list[Hit], timings: dict[str, float], model: str,
                 notices: list[str], text: str = CANNOT_ANSWER) -> Answer:
        return Answer(
            question=question, text=text, citations=(), hits=tuple(hits[:3]), abstained=True,
            timings=timings, model=model, settings_fingerprint=self.fingerprint,
            prompt_version=self.prompts.version, searched=searched, mode="abstained", notices=tuple(notices),
        )


def ingest(settings: Settings, embedder: Embedder | None = None, paths: list[Path] | None = None,
           keep_removed: bool = False, rebuild: bool = False, progress: Progress | None = None) -> IngestSummary:
    """build_index with the real embedder by default. A second writer fails before any model loads."""
    check_unlocked(settings)
    embedder = embedder or load_embedder(settings.embedding, cache_dir=settings.paths.data_dir)
    return build_index(settings, embedder, paths=paths, keep_removed=keep_removed, rebuild=rebuild,
                       progress=progress)


def _term_or_paper(q: Q.Question, hits: list[Hit]) -> Q.Question:
    """"What is RKME?" asks what the paper found first spells out as "reduced kernel mean embedding (RKME)", a term
    of the paper: answered as "What does RKME stand for?"; "What is SOLAR?" (the paper's name) and "What is UHM?" (the
    method it introduces, "we introduce universal horizon models (UHM), ...") ask what the paper's work is (as read)."""
    name = Q.name_asked(q.text) if "overview" in q.asks and hits else ""
    paper = hits[0].paper if name else None
    spelt = expansion_of(name, paper.abstract) if paper is not None else None
    if paper is None or spelt is None or compose.head_of(paper.title).lower() == name.lower() or \
            spelt[1].lower() in {own.lower() for own in own_long_names(paper.abstract)}:
        return q
    return q.spelling_out(name)


def _lead(paper: Paper) -> set[str]:
    """The words of a paper's title and opening sentence."""
    opening = next(iter(split_sentences(paper.abstract)), "")
    return set(tokens(f"{paper.title} {opening}"))


def discussed(q: Q.Question, blocks: list[Evidence]) -> str:
    """What the user already knows of the papers a follow-up is about, read with the question when judging whether
    an answer sentence adds anything: "And which model does it match?" about SERA: "SERA [1]." names the paper
    discussed, not what was asked; "What datasets?" about TFMixer: its title ("TFMixer: a joint time–frequency
    modeling framework …") says nothing more, unless what is asked is what the paper is or does."""
    whole = q.kind == "factoid" and "overview" not in q.asks
    return " ".join(b.hit.paper.title if whole else support.short_name(b.hit.paper.title)
                    for b in blocks if b.hit.paper.paper_id in q.pinned)


def _listed_from_evidence(q: Q.Question, knobs: Answering) -> bool:
    """A summary not pinned to earlier papers is a list made from the evidence; the model would only add closing
    sentences, which `knobs` (this model's settings) may leave out, and has nothing to say of a listing of the
    collection itself: then no prompt to fill, nothing to wait for."""
    return q.summary and not q.pinned and (knobs.summary_synthesis == 0 or q.collection)


# A draft of source markers alone so far: "[", "[1", "[1]", "[1][2].", "[1, 2]" (not "12" nor "12 [1]").
_MARKERS_SO_FAR = re.compile(r"\s*(?:\[[\d,\s]*\]?[\s.,;]*)*")


def _turns(history: list[Message] | None) -> list[Message]:
    """The conversation's question and answer turns that say something."""
    return [m for m in (history or []) if m.get("role") in {"user", "assistant"} and m.get("content")]


def with_model(settings: Settings, model_path: str) -> Settings:
    return settings.with_values({"generation.model_path": model_path})


