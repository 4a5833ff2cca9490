"""The bus: typed message models and their codecs (messages), the Kafka transport that moves bytes
(kafka), offset ranges and the batches and cursors cut from them (offsets), and the embedded
Kafka-wire broker (broker). Nothing here knows the store or the orchestrator.
"""
