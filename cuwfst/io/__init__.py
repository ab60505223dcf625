"""Readers and writers of user data: utterances in (.npz, .npy/.pt directories, Kaldi
scp/ark), results out (text, JSONL, CTM), WER reports."""

from .batching import Batch, batches
from .readers import Utterance, open_inputs
from .scoring import read_refs, score, write_reports
from .writers import FORMATS, Record, make_record, make_writer

__all__ = ["Batch", "batches", "Utterance", "open_inputs", "read_refs", "score", "write_reports",
           "FORMATS", "Record", "make_record", "make_writer"]
